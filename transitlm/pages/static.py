"""The static parts of a page: its inline CSS and its small plain JavaScript.
"""

# Fonts with Chinese glyphs, tried after the Latin ones (city, station and
# line names are Chinese): macOS, Windows, then the common Linux packages
# (fonts-noto-cjk, fonts-wqy-microhei, fonts-wqy-zenhei, fonts-arphic-*,
# fonts-droid-fallback).  No web font: a page makes no network request.
CJK_FONTS = ('"PingFang SC","Hiragino Sans GB","Microsoft YaHei","Noto Sans CJK SC",'
             '"Source Han Sans SC","WenQuanYi Micro Hei","WenQuanYi Zen Hei",'
             '"AR PL UMing CN","Droid Sans Fallback"')
SANS = 'system-ui,-apple-system,"Segoe UI",Roboto,"Noto Sans",Arial,%s,sans-serif' % CJK_FONTS
MONO = 'ui-monospace,Menlo,Consolas,"DejaVu Sans Mono",%s,monospace' % CJK_FONTS

CSS = """
body{font:14px/1.45 @SANS@;
 color:#1f2328;background:#fff;margin:0 auto;max-width:1180px;padding:16px 24px 48px;
 overflow-wrap:break-word}
bdi,code{overflow-wrap:anywhere}bdi.word{overflow-wrap:break-word}
.tbox{max-width:100%;overflow-x:auto;margin:8px 0}.tbox>table{margin:0}
h1{font-size:22px;margin:8px 0 4px}h2{font-size:18px;margin:28px 0 8px;
 border-bottom:1px solid #d0d7de;padding-bottom:4px}h3{font-size:15px;margin:18px 0 6px}
code{font:12px/1.4 @MONO@;background:#f3f4f6;padding:1px 4px;
 border-radius:3px;word-break:break-all}
.sub,.sig,.opts,.counts,.note{margin:4px 0;color:#3d444d}.note{font-size:13px}
table.data,table.rows,table.verdicts{border-collapse:collapse;margin:8px 0;font-size:13px}
table.data th,table.data td,table.rows>thead>tr>th,table.rows>tbody>tr>td,table.verdicts th,
table.verdicts td{border-bottom:1px solid #e1e4e8;padding:3px 10px 3px 0;text-align:left;
 vertical-align:top}table.verdicts th{font-size:12px;color:#3d444d}
table.inputs td:nth-child(3){font:11px @MONO@;color:#3d444d}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.warnings{background:#fff8e1;border:1px solid #c9a227;padding:6px 12px;margin:8px 0;
 border-radius:4px}.warnings ul{margin:4px 0;padding-left:20px}
.labels-check{background:#eef6ff;border:1px solid #6a9fd8;padding:6px 12px;margin:8px 0;
 border-radius:4px}.labels-check ul{margin:4px 0;padding-left:20px}
svg.chart{display:block;max-width:100%;height:auto;margin:8px 0}
svg.chart text{font-size:12.5px;fill:#1f2328}svg.chart text.lbl{text-anchor:end}
svg .bar{fill:#2f6f9f}svg .bar.check{fill:#8fb3cf}svg .bar.stage-error{fill:#8a3b3b}
svg .bar.stage-no_response{fill:#7a5c2e}svg a.codelink:hover .bar,svg a.codelink:focus .bar{
 fill:#113f63}svg a.codelink text.lbl{text-decoration:underline;fill:#0b4f8a}
.metrics{display:flex;flex-wrap:wrap;gap:8px}.metric{border:1px solid #d0d7de;border-radius:6px;
 padding:6px 12px;min-width:92px}.mname{font-weight:600;font-size:13px}
.mval{font-size:20px;font-variant-numeric:tabular-nums}.mdesc{font-size:11px;color:#4b535c;
 max-width:130px}.summary{margin-top:10px}
.filters{display:flex;flex-wrap:wrap;gap:12px;align-items:center;margin:8px 0;
 padding:8px;background:#f6f8fa;border-radius:6px}.filters select,.filters input{
 font:inherit;padding:2px 4px;max-width:18em}
table.rows{width:100%}table.rows>tbody.r>tr.head>td{border-bottom:none;padding-top:6px}
table.rows>tbody>tr>td.id{font:12px @MONO@;min-width:20em}
table.rows>tbody>tr.more>td{padding:0 0 6px 0}table.rows tbody.r{border-bottom:1px solid #d0d7de}
details>summary{cursor:pointer;color:#0b4f8a}.rowbody{display:flex;flex-wrap:wrap;gap:16px;
 align-items:flex-start;
 padding:6px 0}.rowbody>*{min-width:0}.mapbox{max-width:460px}
svg.map{border:1px solid #d0d7de;border-radius:4px;display:block;max-width:100%;height:auto}
svg.map .bg{fill:#fbfbfa}svg.map path.dir{stroke:#fff;stroke-width:1;stroke-linejoin:round}
svg.map path.dir.lbl{fill:#57606a}
svg.map line.seg{stroke-linecap:round}svg.map polyline{fill:none;stroke-linecap:round;
 stroke-linejoin:round}
svg.map .limit{fill:none;stroke:#6e7781;stroke-dasharray:3 4;stroke-width:1}
svg.map .stop,svg.map .stops circle{stroke:#1f2328;stroke-width:1}svg.map rect.mark{fill:#1f2328}
svg.map text.mk,svg.map .scale text,svg.map .north{font-size:11px;fill:#1f2328}
svg.map text.acc{font-size:10.5px;fill:#3d444d}svg.map text.acc,svg.map text.mk{
 paint-order:stroke;stroke:#fbfbfa;stroke-width:3px}svg.map line.leader{stroke:#6e7781;
 stroke-width:.8}
svg.map .scale path{fill:none;stroke:#1f2328;stroke-width:1.5}
.mapbox>input{margin:0 2px 6px 10px;vertical-align:middle}.mapbox>label{font-size:12px;
 vertical-align:middle}.swl{font-size:12px;color:#3d444d}
.o-first:checked~svg .rk:not(.rk-first),.o-second:checked~svg .rk:not(.rk-second),
.o-third:checked~svg .rk:not(.rk-third){display:none}
ul.legend{list-style:none;padding:0;margin:6px 0;font-size:12px}ul.legend li{margin:2px 0}
svg.swatch{vertical-align:middle;margin-right:6px}
.broken{color:#a31515;font-size:12px}.missing{color:#5c4400;font-size:12px}
table.verdicts td.v-ok{color:#116329}table.verdicts td.v-bad{color:#a31515;font-weight:600}
table.verdicts td.v-na{color:#57606a;font-style:italic}
nav a{margin-right:12px}
""".replace("@SANS@", SANS).replace("@MONO@", MONO)

SCRIPT = """
(function(){
window.onerror=function(m){document.body.setAttribute('data-js-error',String(m));};
var rows=[].slice.call(document.querySelectorAll('tbody.r'));
var f={status:get('f-status'),stage:get('f-stage'),code:get('f-code'),city:get('f-city'),
 text:get('f-text')};
function get(id){return document.getElementById(id);}
function apply(){
 var q=(f.text&&f.text.value||'').toLowerCase(),shown=0;
 rows.forEach(function(r){
  var d=r.dataset,ok=(!f.status.value||d.status===f.status.value)&&
   (!f.stage.value||d.stage===f.stage.value)&&
   (!f.code.value||(' '+d.codes+' ').indexOf(' '+f.code.value+' ')>=0)&&
   (!f.city.value||d.city===f.city.value)&&
   (!q||r.rows[0].textContent.toLowerCase().indexOf(q)>=0);
  r.hidden=!ok;if(ok)shown++;});
 get('shown').textContent=shown+' of '+rows.length+' listed rows shown';}
function fromHash(){
 var h=decodeURIComponent(location.hash||'');
 if(h.indexOf('#code=')===0&&f.code){f.code.value=h.slice(6);apply();
  get('rows').scrollIntoView();}}
if(f.status){
 ['status','stage','code','city'].forEach(function(k){f[k].addEventListener('change',apply);});
 f.text.addEventListener('input',apply);
 get('f-reset').addEventListener('click',function(){
  ['status','stage','code','city','text'].forEach(function(k){f[k].value='';});apply();});
 window.addEventListener('hashchange',fromHash);apply();fromHash();}
document.body.setAttribute('data-ready','1');
})();
"""
